"""The report of a run, drawn from its record by an observer outside the loop (observer.py)."""
