"""The open agent protocols the app speaks, each a surface over the run service: AG-UI
and A2A."""
