package native

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/artgo/art"
)

// Ensure a training call queued behind another step gives up when its own
// context ends instead of waiting for that step, however long it runs:
// Train, TrainSFT and RestoreCheckpoint. The step in progress is an SFT
// step held at its progress callback.
func TestTrain_QueuedCallHonoursContext(t *testing.T) {
	s := openTiny(t)
	defer s.Close()
	var tr art.Trajectory
	tr.AddMessage(art.UserMsg("hi"), art.AssistantMsg("yo"))
	held, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := s.TrainSFT(context.Background(), []art.Trajectory{tr}, art.TrainSFTConfig{}, func(done, total int) {
			close(held)
			<-release
		})
		first <- err
	}()
	select {
	case <-held:
	case err := <-first:
		t.Fatalf("the SFT step to queue behind ended before its progress callback: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the SFT step to queue behind did not reach its progress callback within a minute")
	}
	for name, call := range map[string]func(ctx context.Context) error{
		"Train": func(ctx context.Context) error {
			_, err := s.Train(ctx, []art.TrajectoryGroup{{Trajectories: []art.Trajectory{tr, tr}}}, art.TrainConfig{AllowTrainingWithoutLogprobs: true}, nil)
			return err
		},
		"TrainSFT": func(ctx context.Context) error {
			_, err := s.TrainSFT(ctx, []art.Trajectory{tr}, art.TrainSFTConfig{}, nil)
			return err
		},
		"RestoreCheckpoint": func(ctx context.Context) error {
			_, err := s.RestoreCheckpoint(ctx, 0)
			return err
		},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- call(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s queued behind a step: %v after %s; want its deadline", name, err, time.Since(start))
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s with a 200ms deadline still waits for the step in progress after 5 s", name)
			close(release)
			<-done
			release = nil
		}
		cancel()
	}
	if release != nil {
		close(release)
	}
	select {
	case err := <-first:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the released SFT step did not end within a minute")
	}
	if s.Step() != 1 {
		t.Errorf("step %d after one SFT step and cancelled calls; want 1", s.Step())
	}
}

// Ensure Info may be called while a restore replaces the trainer's adapter
// (the server answers /v1/art/model during one): under -race this fails
// if Info reads the adapter the restore writes.
func TestInfo_DuringRestore(t *testing.T) {
	s := openTiny(t)
	defer s.Close()
	want := s.Info().LoRA
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				if got := s.Info().LoRA; got.Rank != want.Rank {
					t.Errorf("Info during a restore: LoRA rank %d, want %d", got.Rank, want.Rank)
					return
				}
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 3 {
		if _, err := s.RestoreCheckpoint(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
}
