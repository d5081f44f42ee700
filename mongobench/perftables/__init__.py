"""The Performance Tables: experiments as data, the runner, the capability probe and the plan's estimate."""
