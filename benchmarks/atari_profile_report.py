"""The tables of benchmarks/atari_profile.py: its raw measurements of one profiled run turned into the parts of an
agent step (wall and CPU ms per agent step, share of the cores) and printed as markdown. A run's `inference` (absent
in older files: 'batched') says whether the actors' policy step went through the batching thread or NumPy."""

# The accumulators of each thread in a run's measurements (atari_profile.py fills them).
KEYS = ('policy_wall', 'policy_cpu', 'policy_calls', 'env_wall', 'env_cpu', 'env_calls', 'unroll_wall', 'unroll_cpu',
        'unrolls', 'get_wall', 'get_cpu', 'batches', 'batch_items', 'compute_wall', 'compute_cpu', 'learner_wall',
        'learner_cpu', 'learner_steps', 'stack_wall', 'stack_cpu', 'stacks', 'compute_wall_learning',
        'batches_learning')


def analyse(result):
  """The parts of a profiled run: list of (part, wall ms per agent step per actor or None, CPU ms per agent step or
  None, notes), and a dict of totals. NumPy inference: no batching-thread or inference-pool row (both are 0)."""
  start, end, n = result['start'], result['end'], result['num_actors']
  numpy = result.get('inference', 'batched') == 'numpy'
  window = end['wall'] - start['wall']
  cores = result['cores']
  acc = {}
  for name in end['acc']:
    before = start['acc'].get(name, dict.fromkeys(KEYS, 0.))
    acc[name] = {k: end['acc'][name][k] - before[k] for k in KEYS}
  thread_cpu = {name: end['threads'][name] - start['threads'].get(name, 0.) for name in end['threads']}
  actors = sorted(name for name in end['children'])
  steps = sum(acc[a]['env_calls'] for a in actors)
  child_cpu = {a: end['children'][a] - start['children'][a] for a in actors}
  total_child = sum(child_cpu.values())
  process_cpu = end['process_cpu'] - start['process_cpu']
  total_cpu = process_cpu + total_child
  batch_sizes = {int(b): c - start['batch_sizes'].get(b, 0) for b, c in end['batch_sizes'].items()}
  num_batches = sum(batch_sizes.values())
  batcher_name = next((name for name in thread_cpu if name.startswith('batch_fn')), None)  # None: NumPy inference
  batcher = acc.get(batcher_name, dict.fromkeys(KEYS, 0.))
  main = acc.get('MainThread', dict.fromkeys(KEYS, 0.))
  prefetch = acc.get('prefetch', dict.fromkeys(KEYS, 0.))
  learner_steps = main['learner_steps']
  lcal, ical, ecal = result['learner_calibration'], result['inference_calibration'], result['environment_calibration']
  inference_pool = sum(ical[str(b)]['pool_cpu'] * c for b, c in batch_sizes.items() if str(b) in ical)
  learner_pool = lcal['pool_cpu'] * learner_steps
  policy_wall, policy_cpu, policy_calls, env_wall, env_cpu, unroll_wall = (sum(acc[a][key]
                                                                               for a in actors)
                                                                           for key in ('policy_wall', 'policy_cpu',
                                                                                       'policy_calls', 'env_wall',
                                                                                       'env_cpu', 'unroll_wall'))
  actor_thread_cpu = sum(thread_cpu.get(a, 0.) for a in actors)
  queue_wall = sum(max(window - acc[a]['unroll_wall'], 0.) for a in actors)
  known_threads = set(actors) | {batcher_name, 'MainThread', 'prefetch'}
  other_threads = sum(v for k, v in thread_cpu.items() if k not in known_threads)
  ms = lambda x: 1000. * x / steps  # noqa: E731  pylint: disable=unnecessary-lambda-assignment
  mean_batch = batcher['batch_items'] / max(batcher['batches'], 1)
  learning_wall, learning_batches = batcher['compute_wall_learning'], batcher['batches_learning']
  if numpy:
    rows = [('inference: the NumPy policy step in the actor\'s thread (`NumpyPolicy.__call__`; wall and CPU: the '
             'actor\'s)', ms(policy_wall), ms(policy_cpu),
             f'{policy_calls / window:.0f} calls/s, {1000 * policy_wall / max(policy_calls, 1):.3f} ms wall and '
             f'{1000 * policy_cpu / max(policy_calls, 1):.3f} ms CPU each (wall beyond CPU: waiting for a core or the '
             'GIL)')]
  else:
    rows = [
        ('inference: the policy call (wall: waiting for the batching thread included; CPU: the actor thread in it)',
         ms(policy_wall), ms(policy_cpu), f'a batch (mean {mean_batch:.2f} calls) takes '
         f'{1000 * batcher["compute_wall"] / max(batcher["batches"], 1):.2f} '
         f'ms in the batching thread: {1000 * learning_wall / max(learning_batches, 1):.2f} ms during a learner step '
         f'({100 * learning_batches / max(batcher["batches"], 1):.0f}% of the batches), '
         f'{1000 * (batcher["compute_wall"] - learning_wall) / max(batcher["batches"] - learning_batches, 1):.2f} ms '
         'otherwise'),
        ('inference: batching thread (take and stack the calls, pack, the TensorFlow call, unpack, wake the callers)',
         None, ms(thread_cpu[batcher_name]), f'{batcher["batches"] / window:.0f} batches/s; waits for calls '
         f'{100 * (batcher["get_wall"] - batcher["get_cpu"]) / window:.0f}% of the time; get_inputs '
         f'{ms(batcher["get_cpu"]):.3f} + compute {ms(batcher["compute_cpu"]):.3f} CPU ms per agent step'),
        ('inference: TensorFlow thread pools (calibrated per batch size)', None, ms(inference_pool),
         'alone: ' + ', '.join(f'b={b}: {1000 * ical[str(b)]["pool_cpu"]:.2f}' for b in (1, n) if str(b) in ical) +
         ' ms pool CPU per batch')
    ]
  rows += [
      ('environment process: its CPU (4 ALE frames, max-pool, grey, resize, stack; its end of the pipe)',
       1000. * total_child / steps, 1000. * total_child / steps,
       f'one step alone in-process: {1000 * ecal["cpu"]:.3f} ms CPU (the rest: its pickling, pipe, loop, '
       'cache misses under load)'),
      ('IPC: the step round trip minus the child\'s CPU (CPU: the actor thread: pickling, pipe, polling)',
       ms(env_wall - total_child), ms(env_cpu), f'round trip {ms(env_wall):.3f} ms per step'),
      ('actor Python: the step loop outside the two calls, stacking the unroll',
       ms(unroll_wall - policy_wall - env_wall), ms(actor_thread_cpu - policy_cpu - env_cpu), ''),
      ('actor waiting for the unroll queue (the learner is behind)', ms(queue_wall), None, ''),
      ('prefetch thread: stacking 32 unrolls time-major, to tensors', None, ms(thread_cpu.get('prefetch', 0.)),
       f'batch_unrolls {1000 * prefetch["stack_wall"] / max(prefetch["stacks"], 1):.0f} ms wall per batch'),
      ('learner step (main thread + TensorFlow thread pools, calibrated)', None, ms(main['learner_cpu'] + learner_pool),
       f'{learner_steps / window:.2f} steps/s, {1000 * main["learner_wall"] / max(learner_steps, 1):.0f} ms wall each; '
       f'alone: {1000 * lcal["wall"]:.0f} ms wall, {1000 * (lcal["pool_cpu"] + lcal["main_cpu"]):.0f} ms CPU'),
      ('learner loop: metrics, episodes, summaries' + (', the NumPy actors\' parameter copy' if numpy else '') +
       ' (main thread outside the step)', None, ms(thread_cpu['MainThread'] - main['learner_cpu']), ''),
      ('other Python threads', None, ms(other_threads), ''),
  ]
  parts = sum(r[2] for r in rows if r[2] is not None) / 1000. * steps
  # The environment row's CPU is the child's and its wall is the same child CPU seen by the actor: both listed once.
  unaccounted = total_cpu - parts
  rows.append(('unaccounted: measured CPU minus the parts (TensorFlow pools beyond the calibration: spinning, '
               'contention)', None, ms(unaccounted), f'{100 * unaccounted / total_cpu:+.1f}% of the total'))
  machine_busy = end['machine_busy'] - start['machine_busy']
  machine_total = end['machine_total'] - start['machine_total']
  totals = dict(window=window, steps=steps, agent_steps_per_second=steps / window,
                frames_per_second=result['frames_per_second'], total_cpu=total_cpu, process_cpu=process_cpu,
                children_cpu=total_child, parts_cpu=parts, unaccounted=unaccounted, wall_per_step=window * n / steps,
                batch_sizes=batch_sizes, num_batches=num_batches, mean_batch=None if numpy else mean_batch, cores=cores,
                numpy=numpy, machine_busy_share=machine_busy / machine_total if machine_total else float('nan'),
                inference_pool=inference_pool, learner_pool=learner_pool, queue_wall=queue_wall,
                policy_wall_per_step=ms(policy_wall))
  return rows, totals


def format_table(result, baseline=None):
  rows, t = analyse(result)
  n, cores, window, steps = result['num_actors'], t['cores'], t['window'], t['steps']
  share = lambda cpu_ms: f'{100 * cpu_ms * steps / 1000 / window / cores:.1f}%'  # noqa: E731
  lines = [
      f'### {n} actors{", NumPy inference" if t["numpy"] else ""}: {t["frames_per_second"]:.0f} frames/s '
      'instrumented' + (f', {baseline["frames_per_second"]:.0f} uninstrumented (instrumented / uninstrumented = '
                        f'{t["frames_per_second"] / baseline["frames_per_second"]:.2f})' if baseline else '') +
      f'; {t["agent_steps_per_second"]:.0f} agent steps/s over {window:.0f} s', '',
      '| part | wall ms per agent step (per actor) | CPU ms per agent step | share of the '
      f'{cores} cores | notes |', '|---|---|---|---|---|'
  ]
  for part, wall, cpu, notes in rows:
    lines.append(f'| {part} | {"" if wall is None else f"{wall:.3f}"} | {"" if cpu is None else f"{cpu:.3f}"} | '
                 f'{"" if cpu is None else share(cpu)} | {notes} |')
  total_ms = 1000 * t['total_cpu'] / steps
  lines.append(f'| **total: this process + its {n} environment processes** | {t["wall_per_step"] * 1000:.3f} | '
               f'{total_ms:.3f} | {share(total_ms)} | process {1000 * t["process_cpu"] / steps:.3f}, children '
               f'{1000 * t["children_cpu"] / steps:.3f} ms per agent step |')
  ours = t['total_cpu'] / window / cores
  lines.append(f'| other processes on the machine (/proc/stat busy minus ours) | | | '
               f'{100 * (t["machine_busy_share"] - ours):.1f}% | |')
  lines.append(f'| idle | | | {max(0., 100 * (1 - t["machine_busy_share"])):.1f}% | |')
  sanity = (f'Sanity: the parts add up to {100 * t["parts_cpu"] / t["total_cpu"]:.1f}% of the measured CPU (process '
            '+ children).')
  if t['numpy']:
    lines += [
        '', 'NumPy inference (experiment.actor_inference = \'numpy\'): each actor\'s forward pass runs in its '
        'own thread, with no batching thread, no inference batch and no inference calibration; the rows of the '
        'batching thread and of the inference\'s TensorFlow pools are omitted (both 0). ' + sanity
    ]
    return '\n'.join(lines)
  hist = ', '.join(f'{b}: {100 * c / t["num_batches"]:.0f}%' for b, c in sorted(t['batch_sizes'].items()))
  lines += ['', f'Inference batches: mean {t["mean_batch"]:.2f} calls; sizes {hist}. ' + sanity]
  ical = result['inference_calibration']
  lines.append('Inference alone, per batch of b calls (pool CPU / batching-thread CPU / callers\' CPU / wall, ms): ' +
               '; '.join(f'b={b}: {1000 * c["pool_cpu"]:.2f} / {1000 * c["batching_thread_cpu"]:.2f} / '
                         f'{1000 * c["callers_cpu"]:.2f} / {1000 * c["wall"]:.2f}' for b, c in ical.items()) + '.')
  return '\n'.join(lines)
