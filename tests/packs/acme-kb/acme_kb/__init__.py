"""ACME's denpex-kb pack: the failures of ACME's own cluster tooling. Its entries are in kb/."""

ENTRY_URL = "https://wiki.acme.example/denpex/{id}"
