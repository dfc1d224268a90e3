"""The shop project's spiders."""
