"""Two real deployments: the fixtures `peer_template` and `start_pair` are the suite's (tests/conftest.py)."""
