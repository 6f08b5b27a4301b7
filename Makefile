.PHONY: demo test bench docs

# Set up everything (virtualenv, install, migrate, demo users) and start the demo.
demo:
	scripts/demo

# The whole test suite (the command .ci/run calls).
test:
	scripts/test

bench:
	scripts/bootstrap && for b in loop_overhead durable_overhead store_save boundary_cost provider_overhead ws_stream mcp_calls dashboard; do .venv/bin/python benchmarks/$$b.py || exit 1; done

# The documentation site, served offline beside the demo (DOCS_PORT, default 8001).
docs:
	scripts/bootstrap && NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs serve -a 127.0.0.1:$${DOCS_PORT:-8001}
