"""The vector stores a bank can live in (bank/places.py makes each one).

A module of its own so that the commands' --store option can list them without importing the bank
(numpy, chromadb) or the settings (pydantic): `cbr <command> --help` stays instant."""

STORES = ("chroma", "faiss", "faiss-hnsw")
