"""Seed memory programs. Each module here is a complete memory program; the
engine reads their *source* (never imports them) and evolves copies of it."""
