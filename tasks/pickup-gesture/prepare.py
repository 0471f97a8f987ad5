"""Build data/ and private/ for pickup-gesture from the PickupGestureWiimoteZ .ts files bundled with aeon (the archive's own split)."""

from pathlib import Path

from dsagent_cbr.tasks.recipes.ts_archive import build_from_archive

if __name__ == "__main__":
    build_from_archive(Path(__file__).resolve().parent, "aeon", "PickupGestureWiimoteZ")
