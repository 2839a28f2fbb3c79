"""The clients suite: each RL library's smallest documented loop over the environments (a
package, so its conftest is ``clients.conftest`` and never shadows ``tests/conftest.py``)."""
