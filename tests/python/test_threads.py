"""Several Python threads running one model at once: every result equals a serial run's."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from conftest import TEXT

TEXTS = [TEXT, "A second, somewhat longer sentence about heads and tokens.", "Short.",
         "The trophy didn't fit in the suitcase because it was too big."]


def test_four_threads_equal_serial(minilm):
    serial = {t: minilm.run(t, capture=("attention", "hidden_states")) for t in TEXTS}

    def work(i):
        text = TEXTS[i % len(TEXTS)]
        r = minilm.run(text, capture=("attention", "hidden_states"))
        return text, r

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(work, range(16)))
    for text, r in results:
        s = serial[text]
        assert np.array_equal(r.attention, s.attention) and np.array_equal(r.hidden_states, s.hidden_states)
        assert r.json() == s.json()


def test_gil_released_during_run(minilm):
    # While one thread runs the model, another can execute Python (a held GIL would stall it).
    import threading
    import time

    done = threading.Event()
    ticks = 0

    def spin():
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    spinner = threading.Thread(target=spin)
    spinner.start()
    for _ in range(3):
        minilm.run(" ".join([TEXT] * 8), probe=False)
    done.set()
    spinner.join()
    assert ticks > 10
