"""Provider tests (a package, so test module names may repeat across test folders)."""
