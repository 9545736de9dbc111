from controller.store.queue import WorkQueue


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def drain(queue: WorkQueue) -> list[str]:
    keys = []
    while (key := queue.get(timeout=0)) is not None:
        keys.append(key)
        queue.done(key)
    return keys


def test_dedup_and_order_among_ready_keys() -> None:
    q = WorkQueue()
    q.add("young", order=("1", "2026-01-02", "young"))
    q.add("old", order=("1", "2026-01-01", "old"))
    q.add("young")
    q.add("*wake", order=("0",))
    assert len(q) == 3
    assert drain(q) == ["*wake", "old", "young"]


def test_delays_keep_the_earliest() -> None:
    clock = Clock()
    q = WorkQueue(clock=clock)
    q.add("a", after=10)
    q.add("a", after=2)
    q.add("a", after=30)
    assert q.get(timeout=0) is None
    clock.t = 2.5
    assert drain(q) == ["a"]
    clock.t = 100
    assert drain(q) == []


def test_key_added_while_active_comes_back_after_done() -> None:
    q = WorkQueue()
    q.add("a")
    assert q.get(timeout=0) == "a"
    q.add("a")
    assert q.get(timeout=0) is None  # not handed out twice at once
    q.done("a")
    assert drain(q) == ["a"]


def test_retry_backs_off_and_forget_resets() -> None:
    clock = Clock()
    q = WorkQueue(base_delay=1, max_delay=5, clock=clock)
    assert [q.retry("a") for _ in range(5)] == [1, 2, 4, 5, 5]
    q.forget("a")
    assert q.retry("a") == 1


def test_close_wakes_a_blocked_get() -> None:
    import threading

    q = WorkQueue()
    got = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    q.close()
    t.join(2)
    assert got == [None]


def test_due_within_reports_active_ready_and_soon() -> None:
    clock = Clock()
    q = WorkQueue(clock=clock)
    q.add("now")
    q.add("soon", after=1)
    q.add("later", after=100)
    assert q.due_within(2) == ["now", "soon"]
    key = q.get(timeout=0)
    assert q.due_within(0) == [key]


def test_discard_forgets_only_idle_keys() -> None:
    q = WorkQueue()
    q.add("gone", order=("1", "a"))
    q.discard("gone")  # still queued: kept
    assert q._order["gone"] == ("1", "a")
    assert drain(q) == ["gone"]
    q.discard("gone")
    assert "gone" not in q._order
