"""Tests of promptkit.providers (a package, so module names never clash with other test folders)."""
