"""Maintainer tooling behind ``sparkforge versions``: package-index reads, the torch version survey, the
published sha256 pins. Only the CLI uses it, so it lives here and not in the collection's module_utils."""
