"""Helpers that task recipes (tasks/<name>/prepare.py) share to build their data offline."""

# the Kaggle-shaped examples `cbr tasks kaggle-example` and `cbr tasks new --example` build
# (kaggle_folders.FOLDERS, which imports pandas: this list does not)
EXAMPLES = ("feedback", "credit", "debates", "carriers")
