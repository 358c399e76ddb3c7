# The loop control of bench/results/gemv-piece-loop-dropped-session64.patch against main's gemv_body loop,
# simulated: the same units in the same ring slots, supertiles, segments, look-ahead loads and finishes.
# python3 bench/results/gemv-piece-loop-simulation-session63.py
import itertools, random
def old(u0,u1,S,D,US,stripes):
    ev=[]; seg=u0//S; piece_u0=u0; st=u0%S; tile_seg0=u0//(S*stripes)*stripes
    base=u0
    while base<u1:
        for d in range(D+1):
            u=base+d
            if u>=u1: break
            ev.append(('load',d,(d+D)%(D+1),u+D)); ev.append(('unit',u,d,st,seg))
            st+=1
            if st==S or u+1==u1:
                ev.append(('finish',seg,piece_u0,u+1,0 if piece_u0==u0 else 1))
                piece_u0=u+1
                if st==S:
                    st=0; seg+=1
                    if seg-tile_seg0==stripes and u+1<u1:
                        tile_seg0=seg; ev.append(('enter_tile',(u+1)//(S*stripes)))
        base+=D+1
    return ev
def new(u0,u1,S,D,US,stripes):
    ev=[]; seg=u0//S; st=u0%S; base=u0; first=True; piece_u0=u0; tile_seg0=u0//(S*stripes)*stripes
    while piece_u0<u1:
        piece_u1=min(u1,(seg+1)*S)
        while base<piece_u1:
            for d in range(D+1):
                u=base+d
                if u<piece_u0: continue
                if u>=piece_u1: break
                ev.append(('load',d,(d+D)%(D+1),u+D)); ev.append(('unit',u,d,st,seg))
                st+=1
            base+=D+1
        if base>piece_u1: base-=D+1
        ev.append(('finish',seg,piece_u0,piece_u1,0 if first else 1)); first=False
        piece_u0=piece_u1
        if st==S:
            st=0; seg+=1
            if seg-tile_seg0==stripes and piece_u1<u1:
                tile_seg0=seg; ev.append(('enter_tile',piece_u1//(S*stripes)))
    return ev
n=0
for S in range(1,13):
  for D in (3,4,6):
    for u0 in range(0,40):
      for u1 in range(u0+1,u0+60):
       for stripes in (1,2,3,5):
        a=old(u0,u1,S,D,0,stripes); b=new(u0,u1,S,D,0,stripes)
        assert a==b,(S,D,u0,u1,stripes)
        n+=1
print('identical event sequences in',n,'cases')
