.PHONY: demo test bench

# Set up everything (virtualenv, install, migrate, demo users) and start the demo.
demo:
	scripts/demo

# The whole test suite (the command .ci/run calls).
test:
	scripts/test

bench:
	scripts/bootstrap && .venv/bin/python benchmarks/loop_overhead.py
