"""Case bank: insight and solution cases, embedded and searchable (see facade.py)."""

from dsagent_cbr.bank.cases import Case
from dsagent_cbr.bank.facade import AddReport, CaseBank, Hit, open_bank, rebuild_bank

__all__ = ["AddReport", "Case", "CaseBank", "Hit", "open_bank", "rebuild_bank"]
