"""Subcommands of `denpex-kb`; each module registers one with `register(subparsers)`."""
