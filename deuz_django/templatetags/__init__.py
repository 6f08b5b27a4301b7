"""``{% load deuz_chat %}{% deuz_chat agent="…" %}``: the chat component on your pages."""
