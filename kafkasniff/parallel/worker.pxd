# kafkasniff/parallel/worker.py is compiled untyped (docs/compiled.md): this file declares no C
# types. It is here so that, in a source tree, an extension module older than worker.py is
# known to be stale (kafkasniff._SourceFinder compares it with the .py and .pxd files: without
# a .pxd it takes the module for an installed wheel's and loads it, edited source or not).
