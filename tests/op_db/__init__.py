"""Parity of ember with torch's own operator database (op_db); see docs/op_db.md."""
