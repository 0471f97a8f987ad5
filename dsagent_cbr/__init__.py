"""dsagent-cbr: a case-based-reasoning LLM agent for data science."""

__version__ = "0.1.0"
