"""Helpers that task recipes (tasks/<name>/prepare.py) share to build their data offline."""
