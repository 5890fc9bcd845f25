# kafkasniff/groups/analysis.py is compiled untyped (setup.py COMPILED): this file declares
# nothing. It is here so that the source finder (kafkasniff/__init__.py, _SourceFinder)
# sees a source tree and runs analysis.py, with a RuntimeWarning, when it is newer than its
# extension module: without a .pxd beside it, a stale build was loaded silently.
