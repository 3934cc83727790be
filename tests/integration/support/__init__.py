"""Helpers of the integration tests: repository builders, the search corpus, service stacks
and fault injectors. Plain functions, classes and data; the pytest fixtures that use them are
in `tests/integration/conftest.py`."""
