"""Differential testing of ember against torch 2.13 (see docs/differential.md)."""
