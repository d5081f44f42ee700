"""The Performance Tables: experiments as data, the runner, server counters and the OS sampler."""
