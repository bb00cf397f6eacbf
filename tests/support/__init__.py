"""What the Python tests share, written once (import from the module that holds it; this package
imports nothing itself, so that a test pays only for what it uses):

- waiting: `wait_until` (a condition, with a bound) and `holds_for` (something does not happen);
- chain: the session's anvil chains, contracts deployed once, snapshot/revert per module;
- accounts: anvil's development accounts and keystores of them;
- redis: a private redis-server;
- worker: the provider agent's Celery worker as a process;
- models: tiny models saved under their content hash;
- provider_market: the provider-agent fixtures (market, keystore, password_file, settings_for);
- e2e_market: the whole market for end-to-end tests (backend, broker, provider worker).

tests/conftest.py turns the shared parts into fixtures.
"""
