"""Development tools, not part of the shipped package: they run from a source checkout only.

- `market`: the local market launcher (anvil, broker, backend, agents, verifiers as processes),
  with `session` (a deployer's chain session) and `feed` (the demo's live view);
- `demo` and `up`: `unchained demo` and `unchained up` on top of it;
- `bench`, `bench_gas`, `bench_load`, `bench_provider`, `process_cpu`: `unchained bench` and
  docs/BENCHMARKS.md;
- `cheats` and `cheater_site/`: the planted cheating provider the demo and the tests catch.

The shipped packages never import this one; `unchained_cli.dev` reaches it when it is there.
"""
