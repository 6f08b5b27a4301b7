"""The open protocols the app speaks: AG-UI and A2A."""
