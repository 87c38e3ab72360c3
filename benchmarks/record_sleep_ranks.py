"""Record tests/data/sleep2ms-gloo.rank{0,1}.json.gz (needs torch; CPU only, gloo, two spawned processes):

    python3 benchmarks/record_sleep_ranks.py OUT_DIR PORT

Rank 1 sleeps 2 ms (``time.sleep``, a built-in frame) at the start of each of 5 steps, before 4 layers of
matmul + all_reduce. Rank 1 starts its profiler 40 ms after rank 0 (and the profilers' own start-up adds more),
and both call a barrier right after starting it: start-up skew. No ``gapscope.step`` ranges: the whole trace
is the window, as with a third-party capture. Files are written as OUT_DIR/sleep2ms.gloo.rank{r}.json.gz."""
import os, sys, time, gzip, shutil, torch, torch.distributed as dist, torch.multiprocessing as mp

def w(r, out, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=r, world_size=2)
    W = [torch.randn(256, 256) / 16 for _ in range(4)]
    x = torch.randn(8, 256)
    def step(x):
        if r == 1:
            time.sleep(0.002)
        for w_ in W:
            x = torch.relu(x @ w_)
            dist.all_reduce(x)
            x = x / 2
        return x
    for _ in range(3):
        step(x)
    dist.barrier()
    if r == 1:
        time.sleep(0.04)
    from torch.profiler import profile, ProfilerActivity as A
    with profile(activities=[A.CPU], with_stack=True) as p:
        dist.barrier()
        for _ in range(5):
            step(x)
    f = f"{out}/sleep2ms.gloo.rank{r}.json"
    p.export_chrome_trace(f)
    with open(f, "rb") as a, gzip.open(f + ".gz", "wb") as b:
        shutil.copyfileobj(a, b)
    os.remove(f)
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(w, args=(sys.argv[1], int(sys.argv[2])), nprocs=2)
