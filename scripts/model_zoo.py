"""`python scripts/model_zoo.py`: the model zoo sweep (torchvision and timm models
on tpu against CPU), scripts/sweeps/model_zoo.py; its docstring says how it
runs."""

from sweeps import model_zoo

if __name__ == "__main__":
    model_zoo.main()
