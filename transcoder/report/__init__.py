"""Rendering only: measured figures and /status documents as rich tables, Markdown and JSON.

May import: transcoder.errors only.
"""
