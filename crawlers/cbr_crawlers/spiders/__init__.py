"""kaggle: a competition's top notebooks and solution write-ups through Kaggle's API; pages: static
write-up pages (blogs, GitHub READMEs)."""
