"""``SummaryWriter`` and ``FileWriter`` over tensorboard's ``EventFileWriter``, as
``torch.utils.tensorboard.writer``."""
import os
import socket
import time
from datetime import datetime

from ember._optional import require
from ember.errors import EmberRuntimeError, EmberValueError
from ember.utils.tensorboard import summary as _summary

__all__ = ["FileWriter", "SummaryWriter"]

_FEATURE = "ember.utils.tensorboard"


def _event_pb2():
    return require("tensorboard.compat.proto.event_pb2", feature=_FEATURE, extra="tensorboard")


class FileWriter:
    """Writes Event protos to one event file in ``log_dir`` (tensorboard's
    ``EventFileWriter``: a queue of ``max_queue`` events flushed every ``flush_secs``)."""

    def __init__(self, log_dir, max_queue=10, flush_secs=120, filename_suffix=""):
        efw = require("tensorboard.summary.writer.event_file_writer", feature=_FEATURE,
                      extra="tensorboard")
        self.event_writer = efw.EventFileWriter(str(log_dir), max_queue, flush_secs,
                                                filename_suffix)

    def get_logdir(self):
        """The directory the event file is written in."""
        return self.event_writer.get_logdir()

    def add_event(self, event, step=None, walltime=None):
        """Write ``event`` stamped with ``walltime`` (default now) and ``step``."""
        event.wall_time = time.time() if walltime is None else walltime
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def add_summary(self, summary, global_step=None, walltime=None):
        """Write a Summary proto as an event."""
        self.add_event(_event_pb2().Event(summary=summary), global_step, walltime)

    def add_graph(self, graph_profile, walltime=None):
        """Write a (GraphDef, RunMetadata) pair."""
        pb = _event_pb2()
        graph, stats = graph_profile
        self.add_event(pb.Event(graph_def=graph.SerializeToString()), None, walltime)
        meta = pb.TaggedRunMetadata(tag="step1", run_metadata=stats.SerializeToString())
        self.add_event(pb.Event(tagged_run_metadata=meta), None, walltime)

    def flush(self):
        """Write pending events to disk."""
        self.event_writer.flush()

    def close(self):
        """Flush and close the event file."""
        self.event_writer.close()

    def reopen(self):
        """After ``close``, continue in a new event file of the same directory."""
        self.event_writer.reopen()


class SummaryWriter:
    """Writes scalars, histograms, images, text, hyperparameters and graphs to TensorBoard
    event files in ``log_dir``, as ``torch.utils.tensorboard.SummaryWriter``.

    ``log_dir`` defaults to ``runs/<Mon DD_HH-MM-SS>_<hostname><comment>``; ``purge_step``
    marks a restart at that step (TensorBoard hides the older events from it on); ``max_queue``
    and ``flush_secs`` control when events reach the disk; ``filename_suffix`` ends the event
    file names. Needs the ``tensorboard`` extra (MissingDependencyError otherwise).
    """

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10,
                 flush_secs=120, filename_suffix=""):
        if not log_dir:
            now = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", now + "_" + socket.gethostname() + comment)
        self.log_dir = log_dir
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = self.all_writers = None
        self._get_file_writer()
        self.default_bins = _summary.default_bins()

    def _get_file_writer(self):
        """The main FileWriter, made again after ``close``."""
        if self.all_writers is None or self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs,
                                          self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                pb = _event_pb2()
                self.file_writer.add_event(pb.Event(step=self.purge_step,
                                                    file_version="brain.Event:2"))
                self.file_writer.add_event(pb.Event(
                    step=self.purge_step, session_log=pb.SessionLog(status=pb.SessionLog.START)))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self):
        """The directory event files are written to."""
        return self.log_dir

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """Log one number (a Python number, a one-element tensor or array) under ``tag``."""
        self._get_file_writer().add_summary(
            _summary.scalar(tag, scalar_value, new_style, double_precision), global_step,
            walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Log several numbers in one chart: each goes to its own run folder
        ``<log_dir>/<main_tag>_<tag>`` under the tag ``main_tag``, as torch."""
        walltime = time.time() if walltime is None else walltime
        base = self._get_file_writer().get_logdir()
        for tag, value in tag_scalar_dict.items():
            folder = base + "/" + main_tag.replace("/", "_") + "_" + tag
            fw = self.all_writers.get(folder)
            if fw is None:
                fw = self.all_writers[folder] = FileWriter(folder, self.max_queue,
                                                           self.flush_secs,
                                                           self.filename_suffix)
            fw.add_summary(_summary.scalar(main_tag, value), global_step, walltime)

    def add_tensor(self, tag, tensor, global_step=None, walltime=None):
        """Log a whole tensor (TensorBoard's tensor plugin)."""
        self._get_file_writer().add_summary(_summary.tensor_proto(tag, tensor), global_step,
                                            walltime)

    def add_histogram_raw(self, tag, min, max, num, sum, sum_squares, bucket_limits,
                          bucket_counts, global_step=None, walltime=None):
        """Log a histogram given by its statistics and buckets (EmberValueError when the
        bucket limits and counts differ in length)."""
        if len(bucket_limits) != len(bucket_counts):
            raise EmberValueError("add_histogram_raw: len(bucket_limits) != "
                                  "len(bucket_counts), see the document.")
        self._get_file_writer().add_summary(
            _summary.histogram_raw(tag, min, max, num, sum, sum_squares, bucket_limits,
                                   bucket_counts), global_step, walltime)

    def add_pr_curve(self, tag, labels, predictions, global_step=None, num_thresholds=127,
                     weights=None, walltime=None):
        """Log the precision-recall curve of binary ``labels`` and ``predictions``."""
        labels = _summary.make_np(labels, "add_pr_curve")
        predictions = _summary.make_np(predictions, "add_pr_curve")
        self._get_file_writer().add_summary(
            _summary.pr_curve(tag, labels, predictions, num_thresholds, weights), global_step,
            walltime)

    def add_pr_curve_raw(self, tag, true_positive_counts, false_positive_counts,
                         true_negative_counts, false_negative_counts, precision, recall,
                         global_step=None, num_thresholds=127, weights=None, walltime=None):
        """Log a precision-recall curve from precomputed counts."""
        self._get_file_writer().add_summary(
            _summary.pr_curve_raw(tag, true_positive_counts, false_positive_counts,
                                  true_negative_counts, false_negative_counts, precision,
                                  recall, num_thresholds), global_step, walltime)

    def add_custom_scalars(self, layout):
        """Log a custom_scalars layout: ``{category: {title: ["Multiline", tags]}}`` or
        ``["Margin", [value, lower, upper]]`` charts."""
        self._get_file_writer().add_summary(_summary.custom_scalars(layout))

    def add_custom_scalars_multilinechart(self, tags, category="default", title="untitled"):
        """A custom_scalars layout of one multiline chart of ``tags``."""
        self.add_custom_scalars({category: {title: ["Multiline", tags]}})

    def add_custom_scalars_marginchart(self, tags, category="default", title="untitled"):
        """A custom_scalars layout of one margin chart of ``[value, lower, upper]``."""
        self.add_custom_scalars({category: {title: ["Margin", tags]}})

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None):
        """Log the histogram of ``values``; ``bins`` is TensorBoard's default buckets
        (``"tensorflow"``) or anything ``numpy.histogram`` takes."""
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        self._get_file_writer().add_summary(
            _summary.histogram(tag, values, bins, max_bins=max_bins), global_step, walltime)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        """Log one image (floats in [0, 1] or uint8), laid out as ``dataformats`` (CHW, HWC,
        HW, ...)."""
        self._get_file_writer().add_summary(
            _summary.image(tag, img_tensor, dataformats=dataformats), global_step, walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        """Log a batch of images (NCHW, NHWC, ...) tiled into one grid image."""
        self._get_file_writer().add_summary(
            _summary.image(tag, img_tensor, dataformats=dataformats), global_step, walltime)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """Log a (Markdown) string under ``<tag>/text_summary``."""
        self._get_file_writer().add_summary(_summary.text(tag, text_string), global_step,
                                            walltime)

    def add_audio(self, tag, snd_tensor, global_step=None, sample_rate=44100, walltime=None):
        """Log a mono sound (1-d, values in [-1, 1]) at ``sample_rate``."""
        self._get_file_writer().add_summary(
            _summary.audio(tag, snd_tensor, sample_rate=sample_rate), global_step, walltime)

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None,
                      tag="default", metadata_header=None):
        """Log points (``mat``: N x D) for TensorBoard's projector, with optional labels
        (``metadata``, a column per ``metadata_header`` entry) and N x C x H x W
        ``label_img`` thumbnails; files go to ``<log_dir>/<step>/<tag>``."""
        from ember.utils.tensorboard import _embedding
        logdir = self._get_file_writer().get_logdir()
        info = _embedding.write_embedding(logdir, mat, metadata, label_img, global_step, tag,
                                          metadata_header)
        if getattr(self, "_projector_config", None) is None:
            proj = require("tensorboard.plugins.projector.projector_config_pb2",
                           feature=_FEATURE, extra="tensorboard")
            self._projector_config = proj.ProjectorConfig()
        self._projector_config.embeddings.extend([info])
        _embedding.write_config(logdir, self._projector_config)

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        """Log the graph of ``model`` traced with ``ember.jit.trace`` on ``input_to_model``
        (a tensor or a tuple of them)."""
        if input_to_model is None:
            raise EmberRuntimeError("add_graph: ember traces the model to draw its graph; "
                                    "pass input_to_model (a tensor or a tuple of tensors)")
        profile = _summary.graph(model, input_to_model)
        if verbose:
            print(profile[0])
        self._get_file_writer().add_graph(profile)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None,
                    global_step=None):
        """Log hyperparameters and their metrics for TensorBoard's HPARAMS tab, in the run
        folder ``<log_dir>/<run_name>`` (default: the current time), as torch."""
        exp, start, end = _summary.hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        if not run_name:
            run_name = str(time.time())
        logdir = os.path.join(self._get_file_writer().get_logdir(), run_name)
        with SummaryWriter(log_dir=logdir) as w:
            for s in (exp, start, end):
                w.file_writer.add_summary(s, global_step)
            for k, v in metric_dict.items():
                w.add_scalar(k, v, global_step)

    def flush(self):
        """Write every pending event to disk."""
        for writer in (self.all_writers or {}).values():
            writer.flush()

    def close(self):
        """Flush and close every event file; a later ``add_*`` opens a new one."""
        for writer in (self.all_writers or {}).values():
            writer.flush()
            writer.close()
        self.file_writer = self.all_writers = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()
