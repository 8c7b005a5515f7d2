"""Staged migration (issue 13): shadow, verify, cutover of consumer groups, rollback. Empty until then."""
