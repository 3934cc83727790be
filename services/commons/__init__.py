"""The commons service."""
