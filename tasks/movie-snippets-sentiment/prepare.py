"""Build data/ and private/ for movie-snippets-sentiment from the VADER paper's rated movie review snippets (vaderSentiment 3.3.2 sdist)."""

from pathlib import Path

from dsagent_cbr.tasks.recipes.vader_sdist import build_from_vader

if __name__ == "__main__":
    build_from_vader(Path(__file__).resolve().parent, "movieReviewSnippets")
