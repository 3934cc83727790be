"""The cograph command line."""
