"""The failure hub: entries rendered to Markdown pages for mkdocs-material, and to text for `explain`."""
