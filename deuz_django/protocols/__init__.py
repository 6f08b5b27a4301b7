"""The agent protocols other front ends speak, each a surface over the run service."""
