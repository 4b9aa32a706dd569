"""Incremental parsers for each model family's reasoning and tool-call formats."""
