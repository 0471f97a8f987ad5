"""Build data/ and private/ for plaid from the PLAID .ts files bundled with sktime (the archive's own split)."""

from pathlib import Path

from dsagent_cbr.tasks.recipes.ts_archive import build_from_archive

if __name__ == "__main__":
    build_from_archive(Path(__file__).resolve().parent, "sktime", "PLAID")
