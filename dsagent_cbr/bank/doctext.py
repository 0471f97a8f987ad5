"""What gets embedded for a case and for a query (pure text functions).

Writeups open with thanks and links and the embedding model reads only its first 256 word pieces, so
a raw writeup is embedded mostly by its pleasantries. We drop links, images, markup and courtesy lines,
and embed the remaining text in a few chunks whose vectors are averaged."""

from __future__ import annotations

import re

from dsagent_cbr.bank.cases import Case

_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+|www\.\S+")
_TAG = re.compile(r"<[^>]{1,200}>")
_CODE_FENCE = re.compile(r"```.*?```", re.S)
_COURTESY = re.compile(
    r"\b(thank|thanks|congrat|grateful|gratitude|kudos|teammates?|shout[- ]?out|"
    r"upvote|hosting this competition)\b",
    re.I,
)
_SPACE = re.compile(r"[ \t]+")

CHUNK_WORDS = 180  # stays under MiniLM's 256 word pieces for ordinary English
MAX_CHUNKS = 4


def clean_text(text: str) -> str:
    text = _CODE_FENCE.sub(" ", text)
    text = _IMAGE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub(" ", text)
    text = _TAG.sub(" ", text)
    kept = []
    for line in text.splitlines():
        line = _SPACE.sub(" ", line).strip(" #*>-|")
        if not line or (_COURTESY.search(line) and len(line.split()) < 60):
            continue
        kept.append(line)
    return "\n".join(kept).strip() or _SPACE.sub(" ", text).strip()


def chunks(text: str, words: int = CHUNK_WORDS, limit: int = MAX_CHUNKS) -> list[str]:
    tokens = text.split()
    parts = [" ".join(tokens[i : i + words]) for i in range(0, len(tokens), words)][:limit]
    return parts or [text]


def document_chunks(case: Case) -> list[str]:
    """The strings whose mean embedding stands for the case: its cleaned content only. (Prefixing the
    competition and title was tried and made modality matches worse: names like "playground series"
    pull unrelated queries.)"""
    return chunks(clean_text(case.text), limit=2 if case.kind == "solution" else MAX_CHUNKS)


def query_text(text: str) -> str:
    return " ".join(clean_text(text).split()[:CHUNK_WORDS])


# How a task's declared modality is said in a query. A description is mostly about its domain
# (hotels, patients, weather); saying what kind of data it is keeps clinical tabular tasks from
# drifting to clinical time-series cases.
MODALITY_PHRASES = {
    "tabular": "tabular data (a table of rows and feature columns)",
    "text": "natural language text (NLP)",
    "forecasting": "time series forecasting",
    "time-series-classification": "time series classification",
}


def task_query(description: str, modality: str) -> str:
    """The retrieval query for a task: its declared kind of data, then its description."""
    phrase = MODALITY_PHRASES.get(modality)
    return f"A {phrase} problem. {description}" if phrase else description
