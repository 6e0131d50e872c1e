"""Support code for the tests: helpers, servers of our own, test-only extensions, API imitations.

Test modules import from here, never from each other or from ``conftest.py``
(which holds only fixtures and pytest hooks).
"""
