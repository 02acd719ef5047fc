"""Scripts end without "Exception ignored in ... __del__" tracebacks.

`import tensorflow_datasets` imports etils, whose `epy.adhoc_utils.
binary_import` does `import __main__`. That reference keeps a script's module
alive past the point where Python frees it at exit, so the script's globals (a
`reverb.Server`, a `tf.data` pipeline holding traced functions) are destroyed
last, after the modules their `__del__` needs were emptied:

  exit -> atexit hooks                       <- `release_main` runs here
       -> modules leave sys.modules; __main__ is freed here, unless a module
          holds it: its globals' __del__ run with every module intact
       -> modules still held are emptied (names set to None), newest first,
          __main__ among the last:
            reverb.Server.__del__     portpicker.return_port is None
            AtomicFunction.__del__    RUNTIME_FUNCTION_REFS is None
                                      -> "TypeError ... 'NoneType' ..."

`import rlds_reverb` registers `release_main` with atexit: it rebinds every
module's `__main__` global to a weak proxy of it (which works as the module
while it lives), so the script is freed where it would be without TFDS.
Nothing of Reverb's or TensorFlow's is touched: the servers stop in their own
`__del__`, as they do in a script that does not import TFDS.
"""

import atexit
import sys
import types
import weakref

_MAIN = '__main__'


def release_main() -> None:
  """Modules that did `import __main__` hold it weakly from now on."""
  main = sys.modules.get(_MAIN)
  if main is None:
    return
  proxy = weakref.proxy(main)
  for module in list(sys.modules.values()):
    # `type()` and `object.__getattribute__`: a lazy module (importlib's
    # LazyLoader) would import itself on any attribute access.
    if module is main or not issubclass(type(module), types.ModuleType):
      continue
    namespace = object.__getattribute__(module, '__dict__')
    if namespace.get(_MAIN) is main:
      namespace[_MAIN] = proxy


def register() -> None:
  """Once per process (atexit.unregister drops any earlier registration)."""
  atexit.unregister(release_main)
  atexit.register(release_main)
