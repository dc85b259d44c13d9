from .machine import tune_allocator

tune_allocator()  # before the first tensor (machine.py)

from .cli import main  # noqa: E402
from .machine import end_process  # noqa: E402

end_process(main())
