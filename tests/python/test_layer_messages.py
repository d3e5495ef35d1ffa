"""Layer errors name the layer, the role of the bad argument and the shapes, and a few layer
defaults and stateful behaviours SINGA code relies on (found by mutation testing: TESTING.md).

Messages are part of the contract here (DESIGN: "messages name the op, the shapes and what was
expected"): each test checks the words a user needs to fix the call, not the whole sentence.
"""
import numpy as np
import pytest

from singa import autograd, layer, tensor


def _t(*shape, seed=0):
    return tensor.from_numpy(np.random.RandomState(seed).randn(*shape).astype(np.float32))


def test_loss_shape_error_names_prediction_target_and_both_shapes():
    mse = layer.MeanSquareError()
    with pytest.raises(ValueError) as e:
        mse(_t(2, 3), _t(3, 2))
    msg = str(e.value)
    assert "MeanSquareError" in msg and "(2, 3)" in msg and "(3, 2)" in msg
    with pytest.raises(TypeError, match="MeanSquareError: the prediction must be a singa Tensor"):
        mse(np.zeros((2, 3), np.float32), _t(2, 3))
    with pytest.raises(TypeError, match="the target must be a singa Tensor"):
        mse(_t(2, 3), [1, 2])


def test_class_target_layers_name_the_prediction_when_it_is_not_a_tensor():
    loss = layer.SoftMaxCrossEntropy()
    loss(_t(2, 3), tensor.from_numpy(np.array([0, 2], np.int32)))  # initialised
    with pytest.raises(TypeError, match="SoftMaxCrossEntropy: the prediction must be"):
        loss(np.zeros((2, 3), np.float32), _t(2))


def test_gemm_rank_error_names_the_matrix_layout_and_the_input_check_respects_transB():
    g = layer.Gemm(3, transB=False)  # W is (in, nb_kernels) = (4, 3)
    x = _t(2, 4)
    y = g(x)
    assert y.shape == (2, 3)
    assert g.W.shape == (4, 3)
    assert g(_t(5, 4, seed=1)).shape == (5, 3)  # 4 input features still accepted
    with pytest.raises(ValueError, match="expected input with 4 features, got 3"):
        g(_t(2, 3))
    with pytest.raises(ValueError, match=r"Gemm.*2-d input matrix.*\(2, 4, 1\)"):
        layer.Gemm(3)(_t(2, 4, 1))


def test_conv2d_messages_name_the_layer_the_padding_and_the_modes():
    with pytest.raises(TypeError, match="padding must be an int or a pair of ints"):
        layer.Conv2d(2, 3, padding=(1, 2, 3))
    with pytest.raises(ValueError) as e:
        layer.Conv2d(2, 3, pad_mode="bogus")
    assert "NOTSET, SAME_UPPER, SAME_LOWER, VALID" in str(e.value)
    with pytest.raises(TypeError, match="^Conv2d: unexpected keyword argument 'bogus'"):
        layer.Conv2d(2, 3, bogus=1)


def test_rnn_messages_name_the_layer_the_layout_and_the_features():
    with pytest.raises(ValueError, match="^LSTM: hidden_size must be a positive int"):
        layer.LSTM(3, 0)
    rnn = layer.RNN(3, 4)
    with pytest.raises(ValueError, match=r"RNN.*3-d input \(seq, batch, input\)"):
        rnn(_t(2, 3))
    with pytest.raises(ValueError, match="expected input with 3 features, got 5"):
        rnn(_t(2, 2, 5))


def test_cat_concatenates_along_axis_0_by_default():
    a, b = _t(2, 3), _t(1, 3, seed=1)
    y = layer.Cat()([a, b])
    np.testing.assert_array_equal(tensor.to_numpy(y),
                                  np.concatenate([tensor.to_numpy(a), tensor.to_numpy(b)]))


def test_dropout_with_a_seed_draws_a_new_mask_at_each_step():
    autograd.training = True
    try:
        d = layer.Dropout(0.5, seed=7)
        x = tensor.from_numpy(np.ones((64, 64), np.float32))
        m1 = tensor.to_numpy(d(x)) != 0
        m2 = tensor.to_numpy(d(x)) != 0
    finally:
        autograd.training = False
    assert 0.3 < m1.mean() < 0.7 and 0.3 < m2.mean() < 0.7
    assert (m1 != m2).any(), "the seed was applied again: the second step reused the first mask"


def test_sizes_may_be_numpy_integers_but_not_bools():
    # The layers share one check (layers/_util.positive_int): numpy integers, as sizes read
    # from arrays are, count; True and non-positive sizes do not.
    import numpy as np
    from singa import layer, tensor
    x = tensor.from_numpy(np.ones((2, 3), np.float32))
    assert layer.Linear(np.int64(4))(x).shape == (2, 4)
    assert layer.Gemm(np.int32(5))(x).shape == (2, 5)
    for bad in (True, 0, -1, 2.0):
        with pytest.raises(ValueError, match="out_features must be a positive int"):
            layer.Linear(bad)
