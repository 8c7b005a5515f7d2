"""Helpers the tests import (conftest.py holds only fixtures and hooks): the CLI runner, the cluster handle and
the check for optional tools."""
